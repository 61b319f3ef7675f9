// schedule.cpp: (being written)
