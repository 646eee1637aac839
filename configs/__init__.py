"""
The paper's settings as plain data, one entry per experiment (configs/paper.py), with the citation of each value in
the paper's sections and tables; train_image.py and train_video.py take them with --paper (on by default for the
datasets only the paper's setting makes sense on).
"""
