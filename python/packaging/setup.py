# Copied into build/python by python/CMakeLists.txt; pyproject.toml has the metadata.
# The package holds a compiled module built beforehand: a platform wheel, not a pure one.
from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=BinaryDistribution, packages=["embedlab"],
      package_data={"embedlab": ["_embedlab*.so", "*.pyi", "py.typed"]})
