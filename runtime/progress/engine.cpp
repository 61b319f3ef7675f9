// engine.cpp: (being written)
