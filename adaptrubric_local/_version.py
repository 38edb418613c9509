"""The package version, in a module of its own so that any module can record it without importing the
package's public facade (`adaptrubric_local/__init__`), which imports most of the package."""
__version__ = "0.1.0"
