"""Figures and reports rendered from run directories."""
