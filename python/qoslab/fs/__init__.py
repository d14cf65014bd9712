"""The page cache and the file systems above the block layer (crates/fs): ext4, HORAEFS, RioFS."""
