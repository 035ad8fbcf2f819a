"""The file-system SPI (sync and async), its derived operations, search and publishing."""
