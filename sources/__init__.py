"""
Where the puzzles' pixels come from: the pictures of image puzzles (sources/images.py: Pictures) and the clips of
video puzzles (sources/videos.py: Clips), taken from photo and video files (sources/files.py: reading, resizing, the
train / val / test split of a folder), the built-in pictures and moving digits (sources/synthetic.py) or Moving MNIST
(sources/mnist.py; the root mnist.py only downloads the MNIST files); and the Stable Diffusion autoencoder of latent
video models (sources/vae.py). Paper: Sec. 4.1 "Datasets" and the supplement's "Image Experiments" and "Video
Experiments". puzzles.py cuts what these return into puzzles; read this folder when you bring your own dataset.
"""
