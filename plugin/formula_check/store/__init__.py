"""What a build keeps between runs: the result cache, the sealed files it and the figure cache
are written as, the digest of the checker's own code, and the stamps of what a check read."""
