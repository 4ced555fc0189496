/*
 * mkdocs-formula-check: the report page's status filter, search box and sortable columns.
 *
 * The page arrives as a plain table, failures first; this script only shows or hides rows and
 * reorders them, reading what it needs from the cells' data-fc-* attributes, and turns the
 * rows into cards where the table does not fit. Without it the table reads as it is (the
 * controls stay hidden). It runs on every page, does nothing where
 * there is no report, and again after Material's instant navigation swaps the page body.
 */
(function () {
  "use strict";

  var SEARCHED_CELLS = [1, 2, 3]; // block, page, oracle

  function rowText(row) {
    return SEARCHED_CELLS.map(function (index) {
      return row.cells[index] ? row.cells[index].textContent : "";
    }).join(" ").toLowerCase();
  }

  function compareKeys(a, b) {
    var x = Number(a);
    var y = Number(b);
    if (a !== "" && b !== "" && !isNaN(x) && !isNaN(y)) { return x - y; }
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function setUp(root) {
    if (root.getAttribute("data-fc-ready")) { return; }
    root.setAttribute("data-fc-ready", "1");
    var table = root.querySelector("table.fc-report-table");
    var filter = root.querySelector("[data-fc-filter]");
    var search = root.querySelector("[data-fc-search]");
    var shown = root.querySelector("[data-fc-count]");
    var empty = root.querySelector("[data-fc-empty]");
    if (!table || !filter || !search) { return; }
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var texts = rows.map(rowText);
    var format = root.getAttribute("data-fc-shown") || "{shown} / {count}";

    function wanted(row) {
      var status = row.cells[0];
      if (filter.value === "") { return true; }
      if (filter.value === "failing") { return status.getAttribute("data-fc-failing") === "1"; }
      return status.getAttribute("data-fc-outcome") === filter.value;
    }

    function apply() {
      var terms = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      var count = 0;
      rows.forEach(function (row, index) {
        var visible = wanted(row) && terms.every(function (term) {
          return texts[index].indexOf(term) !== -1;
        });
        row.hidden = !visible;
        if (visible) { count += 1; }
      });
      if (shown) {
        shown.textContent = format.replace("{shown}", count).replace("{count}", rows.length);
      }
      if (empty) { empty.hidden = count !== 0; }
    }

    function sortBy(header, column) {
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
        cell.removeAttribute("aria-sort");
      });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var order = rows.map(function (row, index) { return index; });
      order.sort(function (i, j) {
        var a = rows[i].cells[column].getAttribute("data-fc-key") || "";
        var b = rows[j].cells[column].getAttribute("data-fc-key") || "";
        return (ascending ? compareKeys(a, b) : compareKeys(b, a)) || i - j;
      });
      order.forEach(function (index) { body.appendChild(rows[index]); });
    }

    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "fc-report-sort";
      while (header.firstChild) { button.appendChild(header.firstChild); }
      header.appendChild(button);
      button.addEventListener("click", function () { sortBy(header, column); });
    });
    // Cards where the table is wider than the page; the table again where it fits. Only a
    // change of width counts: switching layouts changes the height, which must not loop.
    var width = -1;
    function fit() {
      if (root.clientWidth === width) { return; }
      width = root.clientWidth;
      root.classList.remove("fc-report-cards");
      if (table.scrollWidth > root.clientWidth + 1) { root.classList.add("fc-report-cards"); }
    }
    fit();
    if (window.ResizeObserver) { new ResizeObserver(fit).observe(root); }
    filter.addEventListener("change", apply);
    search.addEventListener("input", apply);
    root.querySelector(".fc-report-controls").hidden = false;
    apply();
  }

  function setUpAll() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-fc-report]"), setUp);
  }

  if (typeof window.document$ !== "undefined" && window.document$.subscribe) {
    window.document$.subscribe(setUpAll);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUpAll);
  } else {
    setUpAll();
  }
})();
