"""`python -m tfaccel` runs the command line."""

from tfaccel.cli import main

if __name__ == "__main__":
    main()
