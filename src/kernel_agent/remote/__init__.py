"""Remote kernels' files: moved over the kernel's own channels, checked like a sandbox's.

``transfer`` moves bytes (chunked base64 over ``user_expressions``, sha256 on both
sides), ``names`` checks what a remote kernel calls a file, ``work`` is a remote
kernel's work dir: inputs in at start, its files back after a run.
"""
