// A chart on the Canvas: an agent's chart.create spec drawn by Chart.js (vendor/chart.umd.min.js)
// on a <canvas> that names what it shows, with its numbers below as a table — the text
// alternative a screen reader reads, and anyone may copy. Nothing of the spec is ever markup:
// every label and name goes in as text.
"use strict";

(function () {
  const { make } = window.garden;
  // Told apart by people with the common colour-vision deficiencies (Okabe and Ito).
  const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#b8860b", "#7f7f7f"];
  const NAMES = { bar: "Bar chart", line: "Line chart", pie: "Pie chart", doughnut: "Doughnut chart" };
  const ROUND = ["pie", "doughnut"];
  let drawn = null;

  // The spec as chart.create stored it, or null for anything else (a text "chart" written with
  // file.write reads as its text).
  function parse(text) {
    let spec;
    try { spec = JSON.parse(text); } catch (err) { return null; }
    const fits = spec && typeof spec === "object" && NAMES[spec.type] && Array.isArray(spec.labels)
      && Array.isArray(spec.series) && spec.series.length > 0
      && spec.series.every((s) => s && Array.isArray(s.values) && s.values.length === spec.labels.length
        && s.values.every((v) => typeof v === "number" && Number.isFinite(v)));
    return fits ? spec : null;
  }

  const number = (value, unit) => `${value.toLocaleString()}${unit ? ` ${unit}` : ""}`;

  // What the picture shows, in one sentence or two: the canvas's accessible name.
  function summary(spec) {
    const values = spec.series.flatMap((s) => s.values);
    const low = Math.min(...values);
    const high = Math.max(...values);
    const span = spec.labels.length > 1 ? `${spec.labels[0]} to ${spec.labels[spec.labels.length - 1]}` : spec.labels[0];
    const series = spec.series.map((s) => s.name).join(", ");
    return `${NAMES[spec.type]}: ${spec.title}. ${spec.series.length === 1 ? "Series" : `${spec.series.length} series`} ${series}, `
      + `${spec.labels.length} ${ROUND.includes(spec.type) ? "slices" : "points"} (${span}), values from ${number(low, spec.unit)} `
      + `to ${number(high, spec.unit)}. The numbers follow as a table.`;
  }

  function table(spec) {
    const caption = make("caption", { text: spec.unit ? `${spec.title} (${spec.unit})` : spec.title });
    const head = make("tr", null, make("th", { scope: "col", text: "Label" }),
      ...spec.series.map((s) => make("th", { scope: "col", text: s.name })));
    const rows = spec.labels.map((label, i) => make("tr", null, make("th", { scope: "row", text: label }),
      ...spec.series.map((s) => make("td", { text: s.values[i].toLocaleString() }))));
    return make("table", { className: "canvas-chart-table" }, caption, make("thead", null, head), make("tbody", null, ...rows));
  }

  function config(spec, colours) {
    const round = ROUND.includes(spec.type);
    const datasets = spec.series.map((s, i) => {
      const colour = PALETTE[i % PALETTE.length];
      return {
        label: s.name,
        data: s.values,
        backgroundColor: round ? spec.labels.map((_, j) => PALETTE[j % PALETTE.length]) : colour,
        borderColor: round ? colours.background : colour,
        borderWidth: round ? 1 : 2,
      };
    });
    const axisTitle = { display: Boolean(spec.unit), text: spec.unit || "", color: colours.text };
    return {
      type: spec.type,
      data: { labels: spec.labels, datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false, // drawn at once: nothing moves for a reader who asked for less motion
        color: colours.text,
        plugins: { legend: { display: round || spec.series.length > 1, labels: { color: colours.text } } },
        scales: round ? {} : {
          x: { ticks: { color: colours.text }, grid: { color: colours.grid } },
          y: { ticks: { color: colours.text }, grid: { color: colours.grid }, title: axisTitle },
        },
      },
    };
  }

  function clear(place) {
    if (drawn) { drawn.destroy(); drawn = null; }
    place.replaceChildren();
  }

  // Draw ``text`` (a stored chart) into ``place``; false when it is no chart this can draw.
  function render(place, text) {
    clear(place);
    const spec = parse(text);
    if (!spec || !window.Chart) return false;
    const drawing = make("canvas", { role: "img", "aria-label": summary(spec), className: "canvas-chart-drawing" });
    const numbers = make("div", { className: "canvas-chart-data", role: "region", tabindex: "0", "aria-label": `The numbers of ${spec.title}` }, table(spec));
    place.replaceChildren(make("div", { className: "canvas-chart-frame" }, drawing), numbers);
    const style = getComputedStyle(place);
    const colours = {
      text: style.color,
      background: style.getPropertyValue("--body-bg").trim() || "#fff",
      grid: style.getPropertyValue("--hairline-color").trim() || "rgba(0,0,0,0.1)",
    };
    drawn = new window.Chart(drawing, config(spec, colours));
    return true;
  }

  window.garden.canvasChart = { render, clear };
})();
