"""leak_jax: a JAX training loop that keeps each step's predictions (device arrays, 0.5 MiB) in
a list for an end-of-run metric. Under the default XLA allocator the growth happens inside the
preallocated BFC region; with --exact-pools every buffer is its own allocation.
Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import sys
import time

import jax
import jax.numpy as jnp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
key = jax.random.PRNGKey(17)
key, k1, k2 = jax.random.split(key, 3)
params = {"w1": jax.random.normal(k1, (256, 512)) * 0.06, "w2": jax.random.normal(k2, (512, 512)) * 0.04}


def predict(params, x):
    return jax.nn.softmax(jax.nn.relu(x @ params["w1"]) @ params["w2"])


@jax.jit
def train_step(params, x, y):
    def loss_fn(p):
        return -jnp.mean(jnp.sum(jnp.log(predict(p, x) + 1e-9) * jax.nn.one_hot(y, 512), axis=1))
    grads = jax.grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


predict_jit = jax.jit(predict)
all_predictions = []
t_end = time.time() + seconds
while time.time() < t_end:
    key, kx, ky = jax.random.split(key, 3)
    x = jax.random.normal(kx, (256, 256))
    y = jax.random.randint(ky, (256,), 0, 512)
    params = train_step(params, x, y)
    predictions = predict_jit(params, x)  # LEAK
    all_predictions.append(predictions)
    time.sleep(0.01)
jax.block_until_ready(all_predictions[-1])
print(f"leak_jax: {len(all_predictions)} prediction arrays kept")
