// registry.cpp: (being written)
