"""``python -m stringdiag`` (and ``torchrun -m stringdiag train ...``): the ``stringdiag`` command."""
from .cli.main import entry

if __name__ == "__main__":
    entry()
