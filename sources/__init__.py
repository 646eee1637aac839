"""Where the puzzles' pixels come from (paper: Sec. 4.1 "Datasets"): pictures (images.py) and clips (videos.py) from
files (files.py), built-in pictures and digits (synthetic.py), Moving MNIST (mnist.py; the root mnist.py only downloads
the MNIST files), and the video autoencoder (vae.py)."""
