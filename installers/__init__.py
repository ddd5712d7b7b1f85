"""Host adapters and safe config editing for `retained install`, `uninstall` and `doctor`.

Installed as `retained.installers` (the top-level folder `installers/` is mapped into the one import root).
The host registry is `installers/hosts/`: one module per host.
"""
