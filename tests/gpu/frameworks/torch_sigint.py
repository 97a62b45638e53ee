"""torch_sigint: Ctrl-C in a PyTorch script must still raise KeyboardInterrupt under the shim
(its handler installs only where CPython left the default). Prints what it saw."""
import os
import signal

import torch

x = torch.ones(1 << 20, device="cuda")
print("default_int_handler:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
try:
    os.kill(os.getpid(), signal.SIGINT)
    torch.cuda.synchronize()
    import time
    time.sleep(5)
    print("no KeyboardInterrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt raised")
finally:
    print("finally ran")
