"""
Using a trained model beyond the test metrics: solving your own photo, clip or bag of pieces (own.py, sample.py's
--image, --video, --pieces, --frames, --superres), how sure the solver is (confidence.py), pictures of puzzles
(pictures.py) and animations of the sampling (animate.py). Read it when you use a checkpoint; the method itself is
jpdvt.py.
"""
