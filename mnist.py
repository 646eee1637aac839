"""
Fetch the MNIST digits that Moving MNIST is made of (paper Sec. 4.1 "MovingMNIST"; the clips themselves are
generated on the fly by sources/mnist.py while training and scoring).

    python mnist.py --download mnist          # the four MNIST .gz files (about 12 MB), md5-checked, into mnist/
    python mnist.py --download mnist --mirror https://example.org/mnist/   # from another copy
    python mnist.py --download mnist --mirror file:///path/to/folder/       # offline: from the four .gz files there
    python train_video.py --dataset movingmnist --data-dir mnist --pieces 10 --frames-per-piece 2
"""
import argparse

import sources.mnist as mnist_files
from plumbing.cli import UserError, user_errors


def main(args):
    if args.download is None:
        if args.mirror:
            raise UserError("--mirror needs --download DIR, the folder to fetch the MNIST files into")
        get_parser().print_help()
        return None
    if args.mirror is not None and "://" not in args.mirror:
        raise UserError(f"--mirror must be a base URL like https://host/mnist/, got {args.mirror!r}")
    got = mnist_files.download(args.download, None if args.mirror is None else [args.mirror])
    for name, url in got.items():
        print(f"{name}: {'already there, md5 ok' if url is None else 'fetched from ' + url}")
    print(f"{args.download} holds the MNIST files; use it as --dataset movingmnist --data-dir {args.download}")
    return got


def get_parser():
    p = argparse.ArgumentParser(description="Fetch the MNIST IDX files that Moving MNIST clips are made of "
                                "(train_video.py --dataset movingmnist --data-dir DIR).")
    p.add_argument("--download", metavar="DIR",
                   help="fetch the four MNIST .gz files (train and t10k images and labels) into DIR, created if "
                        "needed; the md5 of each file's decompressed content is checked, a corrupt one is not kept, "
                        "and files already there with the right md5 are not fetched again")
    p.add_argument("--mirror", metavar="URL",
                   help="fetch from this base URL (the file names are appended to it) instead of the built-in "
                        f"mirrors, tried in order: {', '.join(mnist_files.MIRRORS)}; offline, file:///FOLDER/ takes "
                        "them from a folder holding the four .gz files")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
