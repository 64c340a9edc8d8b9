"""`python -m app.log.writer`: the writer process (app.log.writer.loop.main)."""

from app.log.writer.loop import main

if __name__ == "__main__":
    main()
