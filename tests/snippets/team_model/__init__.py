"""A stand-in for a team's own model package, imported by module snippets in the tests."""
