"""
Where the puzzles' pixels come from: photo and video files (files.py: reading, resizing, the train / val / test split
of a folder), the built-in pictures and moving digits (synthetic.py) and the Stable Diffusion autoencoder for latent
video models (vae.py); Moving MNIST is mnist.py at the root. puzzles.py cuts what these return into puzzles; read
this folder when you bring your own dataset.
"""
