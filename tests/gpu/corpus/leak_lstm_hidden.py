"""leak_lstm_hidden: an LSTM language model's perplexity evaluation over a long token stream,
carrying the hidden state from chunk to chunk (as a stateful language model must) but without
`.detach()` — and, as in many training scripts' evaluate(), outside torch.no_grad(). Each new
hidden state links to the previous chunk's graph, so every chunk's saved activations stay alive
as long as the last hidden state does: the graph grows by a chunk per step. (With the hidden
state detached, each chunk's graph would be freed with its loss.)
Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import math
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(12)
vocab, bptt, batch = 4096, 35, 32


class LanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, 256)
        self.rnn = nn.LSTM(256, 256, num_layers=2)
        self.head = nn.Linear(256, vocab)

    def forward(self, tokens, hidden):
        out, hidden = self.rnn(self.embed(tokens), hidden)
        return self.head(out), hidden


model = LanguageModel().cuda().eval()
stream = torch.randint(0, vocab, (20000, batch), device="cuda")
hidden = None
total_loss, chunks = 0.0, 0
t_end = time.time() + seconds
while time.time() < t_end:
    i = (chunks * bptt) % (stream.size(0) - bptt - 1)
    tokens, target = stream[i:i + bptt], stream[i + 1:i + 1 + bptt]
    logits, hidden = model(tokens, hidden)  # LEAK
    total_loss += nn.functional.cross_entropy(logits.view(-1, vocab), target.reshape(-1)).item()
    chunks += 1
    time.sleep(0.01)
print(f"leak_lstm_hidden: {chunks} chunks, perplexity {math.exp(total_loss / chunks):.1f}")
