"""A small JAX program with a convolution (cuDNN) and jitted matmuls: expected exit 0, cuDNN
handle blocks held, ptxas/nvlink children quiet."""
import jax
import jax.numpy as jnp

x = jnp.ones((1024, 1024))
f = jax.jit(lambda a: a @ a / 1024.0 + 1.0)
for _ in range(3):
    x = f(x)
img = jnp.ones((1, 3, 64, 64))
ker = jnp.ones((8, 3, 3, 3))
y = jax.lax.conv(img, ker, (1, 1), "SAME")
print("jax_step ok", float(x.sum()), float(y.sum()))
