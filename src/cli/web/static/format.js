// lockyard web: how the page writes a duration, the twin of `format_duration` in
// src/cli/_format.py (so the page, `log`, `stats` and `top` say the same): 42µs, 4.2ms,
// 450ms, 4.5s, 12s, 5m03s, 2h07m, 3d04h; 0s for none.
"use strict";

window.LockyardFormat = Object.freeze({
  duration(seconds) {
    if (!(seconds > 0)) return "0s";
    if (seconds < 0.0000995) return (seconds * 1e6).toFixed(0) + "µs";
    if (seconds < 0.00995) return (seconds * 1000).toFixed(1) + "ms";
    if (seconds < 0.9995) return (seconds * 1000).toFixed(0) + "ms";
    if (seconds < 9.95) return seconds.toFixed(1) + "s";
    const whole = Math.max(Math.floor(seconds), 10);
    if (whole < 60) return whole + "s";
    const pad = (n) => String(n).padStart(2, "0");
    const minutes = Math.floor(whole / 60);
    if (minutes < 60) return minutes + "m" + pad(whole % 60) + "s";
    const hours = Math.floor(minutes / 60);
    if (hours < 24) return hours + "h" + pad(minutes % 60) + "m";
    return Math.floor(hours / 24) + "d" + pad(hours % 24) + "h";
  },
});
