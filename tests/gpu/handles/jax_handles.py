"""jax_handles: a jitted matmul and jnp.fft.fft in JAX, so XLA makes its cuBLAS(Lt) handles and
cuFFT plans. XLA keeps them for the life of the process: held, not leaked. Under `cudaleak run`
it must exit 0.
Run by scripts/gpu-handles.sh; by hand: cudaleak run -- python3 tests/gpu/handles/jax_handles.py
"""
import jax
import jax.numpy as jnp


@jax.jit
def step(a, b):
    y = a @ b
    return y + 1e-6 * jnp.abs(jnp.fft.fft(y, axis=-1))


key = jax.random.PRNGKey(0)
a = jax.random.normal(key, (256, 256))
b = jax.random.normal(jax.random.split(key)[0], (256, 256))
for _ in range(5):
    a = step(a, b) / 256.0
a.block_until_ready()
assert jax.devices()[0].platform == "gpu", jax.devices()
print("jax_handles: 5 steps, done")
