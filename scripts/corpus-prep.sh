#!/usr/bin/env bash
# scripts/corpus-prep.sh — fills DEST with what the growth corpus (scripts/gpu-corpus.sh) needs
# and the repository does not hold: the pytorch/examples programs it runs unmodified, taken from
# the local git mirror, a small fake MNIST in torchvision's raw idx format (the GPU machine has no
# network, and torchvision's MNIST skips its download when the raw files exist) and a tiny
# ImageFolder for the imagenet example.
# Writes nothing outside DEST; keeps it small (a few MiB), since DEST travels to the GPU machine.
#
#   scripts/corpus-prep.sh DEST        (EXAMPLES_GIT=DIR overrides the mirror's git directory)
set -euo pipefail
dest="${1:?usage: scripts/corpus-prep.sh DEST}"
git_dir="${EXAMPLES_GIT:-/work/.mirror/pytorch+examples/repo}"
# Only the examples the runner uses; each is a GPU program that needs no download.
dirs=(dcgan word_language_model imagenet mnist mnist_rnn mnist_forward_forward vae
      siamese_network distributed/ddp-tutorial-series)

git --git-dir="$git_dir" rev-parse --verify -q HEAD > /dev/null \
    || { echo "corpus-prep: no git repository at $git_dir" >&2; exit 2; }
rm -rf "$dest/examples" "$dest/data"
mkdir -p "$dest/examples" "$dest/data/MNIST/raw"

# The mirror lacks the blob of wikitext-2/train.txt (git archive of the whole folder fails), so
# archive the folder without it and stand test.txt in for it: a shorter epoch, which is what we
# want anyway.
wlm_data=word_language_model/data/wikitext-2
archive_paths=()
for d in "${dirs[@]}"; do
    if [[ "$d" == word_language_model ]]; then
        while IFS= read -r f; do
            [[ "$f" == "$wlm_data/train.txt" ]] || archive_paths+=("$f")
        done < <(git --git-dir="$git_dir" ls-tree -r --name-only HEAD -- "$d")
    else
        archive_paths+=("$d")
    fi
done
# (git prints "invalid object" for that blob even so; the archive is complete.)
git --git-dir="$git_dir" archive HEAD -- "${archive_paths[@]}" | tar -x -C "$dest/examples"
cp "$dest/examples/$wlm_data/test.txt" "$dest/examples/$wlm_data/train.txt"
git --git-dir="$git_dir" rev-parse HEAD > "$dest/examples/COMMIT"

# A tiny ImageFolder for imagenet/main.py (as the examples' own CI makes one, from a download):
# train/ and val/ with 4 classes of 32x32 random-noise PPM images (ImageFolder reads .ppm; its
# RandomResizedCrop(224) scales them up), so an epoch is 16 steps of 64.
python3 - "$dest/data/imagenet-sample" <<'EOF'
import os, random, sys
root = sys.argv[1]
rng = random.Random(20261204)
for split, per_class in (("train", 256), ("val", 64)):
    for c in range(4):
        folder = os.path.join(root, split, f"n{c:08d}")
        os.makedirs(folder)
        for i in range(per_class):
            with open(os.path.join(folder, f"{i:04d}.ppm"), "wb") as f:
                f.write(b"P6\n32 32\n255\n" + rng.randbytes(32 * 32 * 3))
EOF

# Fake MNIST: 6000 train and 1000 test images of random bytes, labels 0-9, in the big-endian
# idx layout torchvision's read_sn3_pascalvincent_tensor checks (magic 0x0803 / 0x0801, dims).
python3 - "$dest/data/MNIST/raw" <<'EOF'
import os, random, struct, sys
raw = sys.argv[1]
rng = random.Random(20261203)
for prefix, n in (("train", 6000), ("t10k", 1000)):
    with open(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x00000803, n, 28, 28))
        f.write(rng.randbytes(n * 28 * 28))
    with open(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x00000801, n))
        f.write(bytes(rng.randrange(10) for _ in range(n)))
EOF
du -sh "$dest"
