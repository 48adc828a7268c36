"""`tilelang.carver`: only the device queries TileLang programs use (`carver.arch.driver`).
TileLang's roller / template search (`carver.template`, `carver.roller`) is not provided."""
