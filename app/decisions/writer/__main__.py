"""`python -m app.decisions.writer`: the writer process (app.decisions.writer.loop.main)."""

from app.decisions.writer.loop import main

if __name__ == "__main__":
    main()
