"""The console's pages, one module per part of the product."""
