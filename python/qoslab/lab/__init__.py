"""The real-device fio lab: loop devices, characterisation studies, kernel schedulers."""
