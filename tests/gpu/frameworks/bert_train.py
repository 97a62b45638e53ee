"""bert_train: a small BERT built from a config (no download), 10 masked-LM training steps with
AdamW. Correct: nothing leaks; the caching allocator and cuBLAS keep their memory."""
import torch
from transformers import BertConfig, BertForMaskedLM

config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                    intermediate_size=1024, vocab_size=8192, max_position_embeddings=256)
model = BertForMaskedLM(config).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(10):
    ids = torch.randint(0, config.vocab_size, (16, 128), device="cuda")
    out = model(input_ids=ids, labels=ids)
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"bert_train: loss {out.loss.item():.3f}")
