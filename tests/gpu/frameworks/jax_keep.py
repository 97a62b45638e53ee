"""jax_keep: JAX keeping one 1 MiB device array per step in a list: the leak only a snapshot
series shows (the BFC allocator holds its region; under --exact-pools every buffer is its own
allocation). argv[1]: seconds (default 5)."""
import sys
import time

import jax
import jax.numpy as jnp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5
step = jax.jit(lambda x: jnp.tanh(x) * 2.0)
x = jnp.ones((512, 512), dtype=jnp.float32)
history = []
t_end = time.time() + seconds
while time.time() < t_end:
    x = step(x)
    history.append(x)  # 1 MiB kept per step
    time.sleep(0.02)
x.block_until_ready()
print(f"jax_keep: {len(history)} arrays kept")
