"""ok_jax_varbatch: a JAX MLP trained with a jitted SGD step on batches of varying size (the
last batch of an epoch is smaller, and batches come in a few sizes), so XLA compiles a few
shapes and then reuses them. Parameters are replaced every step, nothing is kept. Correct: no
growth suspect. argv[1]: seconds (default 12)."""
import random
import sys
import time

import jax
import jax.numpy as jnp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
rng = random.Random(2)
key = jax.random.PRNGKey(0)
sizes = (784, 1024, 1024, 10)
params = []
for n_in, n_out in zip(sizes[:-1], sizes[1:]):
    key, k = jax.random.split(key)
    params.append((jax.random.normal(k, (n_in, n_out)) * n_in ** -0.5, jnp.zeros(n_out)))


def loss_fn(params, x, y):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, 10), axis=1))


@jax.jit
def sgd_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)], loss


steps = 0
t_end = time.time() + seconds
while time.time() < t_end:
    batch = rng.choice((256, 256, 256, 128, 512, 37))
    key, kx, ky = jax.random.split(key, 3)
    x = jax.random.normal(kx, (batch, 784))
    y = jax.random.randint(ky, (batch,), 0, 10)
    params, loss = sgd_step(params, x, y)
    steps += 1
    if steps % 200 == 0:
        print(f"step {steps} loss {float(loss):.3f}")
jax.block_until_ready(params)
print(f"ok_jax_varbatch: {steps} steps")
