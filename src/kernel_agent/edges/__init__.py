"""The host's edges: where something a kernel (or a browser) made first touches the host.

Each validates at the edge, stays bounded and never acts with root's powers:
:mod:`.safefs` (paths and files, no-follow), :mod:`.delivery` (a kernel's files out to
the user), :mod:`.images` (decoding, bounded), :mod:`.escapes` (text for a terminal),
:mod:`.webguard` (Host/Origin of a request; the CSP for a kernel's HTML)."""
