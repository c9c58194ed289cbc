//! Landlock sandbox for the commands MAIA runs (filled in below).
