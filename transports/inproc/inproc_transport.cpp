// inproc_transport.cpp: (being written)
