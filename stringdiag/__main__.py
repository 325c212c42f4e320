"""``python -m stringdiag`` (and ``torchrun -m stringdiag train ...``): the ``stringdiag`` command."""
import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
