"""Adapters: real optimizers behind the candidate protocol.

- :mod:`.kit` -- sparse_opt's own optimizers (numpy only);
- :mod:`.torch_optim` -- ``torch.optim`` (imports torch when an adapter is built);
- :mod:`.tf_kernels` -- TensorFlow's sparse kernels, Keras 3 and ``tf.compat.v1``
  Adam (imports tensorflow when an adapter is built);
- :mod:`.fbgemm` -- FBGEMM's table-batched-embedding CPU optimizers, run live
  (imports torch and fbgemm_gpu when an adapter is built; kernel-form candidates).

Each module lists its adapters in ``CANDIDATES``. Importing a module never
imports its library; building an adapter without the library raises
``ImportError`` naming the package to install.
"""
