"""ok_gpt2_varlen: a small GPT-2 built from a config (transformers, random weights, no download)
trained on random token ids with variable sequence lengths, as text data comes: mostly short
batches, now and then a long one. The caching allocator grows its segments whenever a longer
batch than any before arrives, then reuses them. Correct: no growth suspect.
argv[1]: seconds (default 12)."""
import random
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(0)
rng = random.Random(0)
config = GPT2Config(vocab_size=8192, n_positions=1024, n_embd=256, n_layer=4, n_head=4)
model = GPT2LMHeadModel(config).cuda().train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)


def seq_len():
    # Like tokenised sentences and paragraphs: mostly short, sometimes a whole page.
    r = rng.random()
    if r < 0.85:
        return rng.randint(16, 128)
    if r < 0.97:
        return rng.randint(128, 512)
    return rng.randint(512, 1024)


steps = 0
t_end = time.time() + seconds
while time.time() < t_end:
    ids = torch.randint(0, config.vocab_size, (16, seq_len()), device="cuda")
    out = model(input_ids=ids, labels=ids)
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    steps += 1
    if steps % 50 == 0:
        print(f"step {steps} loss {out.loss.item():.3f}")
torch.cuda.synchronize()
print(f"ok_gpt2_varlen: {steps} steps")
