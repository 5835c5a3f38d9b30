"""The P3O advantage kernel (advantage.cu) and its CuPy launcher (advantage.py)."""
