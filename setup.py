"""What pyproject.toml cannot say: the built-in tasks (kernels/) and packs (packs/) ship inside the
wheel as harness/_builtin/kernels and harness/_builtin/packs. In the checkout they stay top-level,
where people edit them; harness.paths.builtin_dir finds either."""
from setuptools import find_packages, setup

DATA = {"harness._builtin.kernels": "kernels", "harness._builtin.packs": "packs"}

setup(
    packages=find_packages(include=["harness*", "tui*"]) + list(DATA),
    package_dir=DATA,
    package_data={"tui": ["*.tcss", "**/*.tcss"], "harness": ["agents/prices.toml"],
                  **{pkg: ["**/*"] for pkg in DATA}},
    exclude_package_data={pkg: ["**/__pycache__/*", "**/*.pyc"] for pkg in DATA},
)
