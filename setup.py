"""What pyproject.toml cannot say: the built-in tasks (kernels/) and packs (packs/) ship inside the
wheel as harness/_builtin/kernels and harness/_builtin/packs. In the checkout they stay top-level,
where people edit them; harness.authoring.paths.builtin_dir finds either."""
from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Test helpers live beside the code they drive (tui/testing.py: deterministic apps for Pilot tests,
# snapshots, benches and the README screenshot) but are not shipped: a checkout imports them.
NOT_SHIPPED = {("tui", "testing")}


class BuildPy(build_py):
    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir) if (m[0], m[1]) not in NOT_SHIPPED]


DATA = {"harness._builtin.kernels": "kernels", "harness._builtin.packs": "packs"}

setup(
    cmdclass={"build_py": BuildPy},
    packages=find_packages(include=["harness*", "tui*", "warpsmith*"]) + list(DATA),
    package_dir=DATA,
    package_data={"tui": ["*.tcss", "**/*.tcss"], "harness": ["agents/prices.toml"],
                  **{pkg: ["**/*"] for pkg in DATA}},
    exclude_package_data={pkg: ["**/__pycache__/*", "**/*.pyc"] for pkg in DATA},
)
