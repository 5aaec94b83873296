"""SMI tests: a package, so its conftest.py is `smi.conftest` and the root tests keep `conftest`."""
