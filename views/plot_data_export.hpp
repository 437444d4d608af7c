// A plot's numbers as CSV (File > Export data): the values drawn, at full
// precision (the shortest text that reads back to the same double), named as the
// plot's axes and legend name them. A plot is one or more DataTables, one per
// panel (an axis pair and a kind of plottable: curves and bars; heatmaps; box
// plots), in long form: one line per point, the series (legend name) in a column.
//
//   QVector<views::DataTable> tables = view.dataTables();      // or plotDataTables(plot)
//   QStringList files;
//   QString error = views::writeDataTables(tables, "spectrum.csv", &files); // "" on success
//
// Several tables go to several files: the first to the file chosen, each further
// one beside it as <name>-<panel>.csv (e.g. results.csv, results-kl-per-window.csv),
// so every file has one header and columns that mean the same on every line.
// Cells are quoted when they hold a comma, quote, line break or edge space (RFC
// 4180); NaN is an empty cell. Each file is written to a temporary and renamed
// (QSaveFile): complete or absent.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>

class QCustomPlot;
class QCPAxisRect;

namespace embedlab::views {

struct DataTable {
    QString name;              // the panel ("eigenvalue", "energy"): a further file's suffix
    QStringList columns;       // header
    QVector<QStringList> rows; // cells as written (numbers through csvNumber)
};

QString csvNumber(double v);           // shortest round-trip text; "" for NaN
QString csvField(const QString& text); // quoted when it must be
QString tableCsv(const DataTable& table);
// RFC 4180 text back into lines of fields (tests and tools read exports with it).
QVector<QStringList> parseCsv(const QString& text);

// Every visible plottable with data (graphs, curves, bars, colour maps, box plots),
// a table per axis pair and kind; only `rect`'s when given. Screen-only plottables
// (a selection ring) are left out. Columns: series, the key axis' label, the value
// axis' label (bars on a text ticker add its "label"; a colour map: its colour
// scale's label; a box: minimum, lower quartile, median, upper quartile, maximum).
QVector<DataTable> plotDataTables(const QCustomPlot* plot, const QCPAxisRect* rect = nullptr);

// Where table `index` of `tables` goes when the first goes to `file`.
QString dataTableFile(const QString& file, const QVector<DataTable>& tables, int index);
// Writes the tables (see above). "" or the problem, naming the file; `written`
// gets the files written, in order.
QString writeDataTables(const QVector<DataTable>& tables, const QString& file,
                        QStringList* written = nullptr);

} // namespace embedlab::views
