"""Classical, online and conjugate change-rate estimators (numpy/scipy only, no PyMC)."""
