"""jax_train: a few gradient steps of a two-layer MLP in JAX (default BFC allocator; XLA runs
ptxas/nvlink as child processes). Correct: nothing leaks."""
import jax
import jax.numpy as jnp


def loss(params, x):
    w1, w2 = params
    return jnp.mean(jnp.square(jnp.tanh(x @ w1) @ w2))


key = jax.random.PRNGKey(0)
params = (jax.random.normal(key, (512, 512)), jax.random.normal(key, (512, 10)))
grad = jax.jit(jax.grad(loss))
x = jax.random.normal(key, (256, 512))
for _ in range(5):
    g = grad(params, x)
    params = tuple(p - 0.01 * gp for p, gp in zip(params, g))
print("jax_train:", float(loss(params, x)))
