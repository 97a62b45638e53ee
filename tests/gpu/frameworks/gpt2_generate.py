"""gpt2_generate: a transformers GPT-2 built from a config (no download), generating with its KV
cache, then freed with `del` and `torch.cuda.empty_cache()`, as a correct inference service
does between requests. Nothing leaks: under `cudaleak run` it must exit 0."""
import gc

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
cfg = GPT2Config(n_layer=4, n_head=8, n_embd=512, vocab_size=8192, n_positions=256)
model = GPT2LMHeadModel(cfg).cuda().eval()
ids = torch.randint(0, cfg.vocab_size, (4, 16), device="cuda")
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=0)
print("gpt2_generate:", tuple(out.shape))
del model, out, ids
gc.collect()
torch.cuda.empty_cache()
