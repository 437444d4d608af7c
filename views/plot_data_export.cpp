#include "plot_data_export.hpp"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSaveFile>
#include <charconv>
#include <cmath>
#include <qcustomplot.h>

#include "figure_export.hpp"

namespace embedlab::views {

QString csvNumber(double v)
{
    if (std::isnan(v))
        return {};
    char text[64];
    const auto end = std::to_chars(text, text + sizeof text, v).ptr; // shortest that reads back to v
    return QString::fromLatin1(text, static_cast<int>(end - text));
}

QString csvField(const QString& text)
{
    const bool quote = text.contains(',') || text.contains('"') || text.contains('\n') ||
                       text.contains('\r') ||
                       (!text.isEmpty() && (text.front().isSpace() || text.back().isSpace()));
    return quote ? '"' + QString(text).replace('"', "\"\"") + '"' : text;
}

QString tableCsv(const DataTable& table)
{
    QString text;
    auto line = [&text](const QStringList& cells) {
        for (int i = 0; i < cells.size(); ++i)
            text += (i ? "," : "") + csvField(cells[i]);
        text += '\n';
    };
    line(table.columns);
    for (const QStringList& row : table.rows)
        line(row);
    return text;
}

QVector<QStringList> parseCsv(const QString& text)
{
    QVector<QStringList> lines;
    QStringList fields;
    QString field;
    bool quoted = false, any = false;
    for (int i = 0; i < text.size(); ++i) {
        const QChar c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
                field += '"', ++i;
            else if (c == '"')
                quoted = false;
            else
                field += c;
        } else if (c == '"') {
            quoted = any = true;
        } else if (c == ',') {
            fields << field, field.clear(), any = true;
        } else if (c == '\n' || c == '\r') {
            if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')
                ++i;
            fields << field, field.clear();
            lines << fields, fields.clear(), any = false;
        } else {
            field += c, any = true;
        }
    }
    if (any || !field.isEmpty())
        lines << (fields << field);
    return lines;
}

namespace {

QString axisName(const QCPAxis* axis, const char* fallback)
{
    return axis && !axis->label().trimmed().isEmpty() ? axis->label() : QString(fallback);
}

QString slug(const QString& name)
{
    QString s = name.toLower();
    s.replace(QRegularExpression("[^a-z0-9]+"), "-");
    while (s.startsWith('-'))
        s.remove(0, 1);
    while (s.endsWith('-'))
        s.chop(1);
    return s.left(40);
}

enum class Kind { Points, Map, Box };

} // namespace

QVector<DataTable> plotDataTables(const QCustomPlot* plot, const QCPAxisRect* rect)
{
    struct Panel {
        QCPAxis *key, *value;
        Kind kind;
        DataTable table;
    };
    QVector<Panel> panels;
    auto panelFor = [&panels](QCPAxis* key, QCPAxis* value, Kind kind) -> DataTable& {
        for (Panel& p : panels)
            if (p.key == key && p.value == value && p.kind == kind)
                return p.table;
        panels.push_back({key, value, kind, {}});
        return panels.back().table;
    };
    auto* p = const_cast<QCustomPlot*>(plot);
    for (int i = 0; i < p->plottableCount(); ++i) {
        QCPAbstractPlottable* plottable = p->plottable(i);
        QCPAxis *key = plottable->keyAxis(), *value = plottable->valueAxis();
        if (!plottable->visible() || isScreenOnly(plottable) || !key || !value ||
            (rect && key->axisRect() != rect))
            continue;
        const QString series =
            plottable->name().isEmpty() ? QString("series %1").arg(i + 1) : plottable->name();
        const QString x = axisName(key, "x"), y = axisName(value, "y");
        auto points = [&](auto begin, auto end, auto keyOf, auto valueOf) {
            if (begin == end)
                return;
            // A text ticker (categories): the label under each bar, too.
            const auto text = key->ticker().template dynamicCast<QCPAxisTickerText>();
            DataTable& t = panelFor(key, value, Kind::Points);
            if (t.columns.isEmpty())
                t.columns = text ? QStringList{"series", x, "label", y} : QStringList{"series", x, y};
            const bool labelled = t.columns.size() == 4;
            for (auto it = begin; it != end; ++it) {
                QStringList row{series, csvNumber(keyOf(*it))};
                if (labelled)
                    row << (text ? text->ticks().value(keyOf(*it)) : QString());
                t.rows << (row << csvNumber(valueOf(*it)));
            }
        };
        auto key_of = [](const auto& d) { return d.key; };
        auto value_of = [](const auto& d) { return d.value; };
        if (auto* graph = qobject_cast<QCPGraph*>(plottable)) {
            points(graph->data()->constBegin(), graph->data()->constEnd(), key_of, value_of);
        } else if (auto* curve = qobject_cast<QCPCurve*>(plottable)) {
            points(curve->data()->constBegin(), curve->data()->constEnd(), key_of,
                   value_of); // in curve order
        } else if (auto* bars = qobject_cast<QCPBars*>(plottable)) {
            points(bars->data()->constBegin(), bars->data()->constEnd(), key_of, value_of);
        } else if (auto* map = qobject_cast<QCPColorMap*>(plottable)) {
            QCPColorMapData* data = map->data();
            if (data->keySize() == 0 || data->valueSize() == 0)
                continue;
            DataTable& t = panelFor(key, value, Kind::Map);
            if (t.columns.isEmpty())
                t.columns = {"series", x, y,
                             map->colorScale() ? axisName(map->colorScale()->axis(), "value")
                                               : QString("value")};
            for (int k = 0; k < data->keySize(); ++k)
                for (int v = 0; v < data->valueSize(); ++v) {
                    double ck = 0, cv = 0;
                    data->cellToCoord(k, v, &ck, &cv);
                    t.rows << QStringList{series, csvNumber(ck), csvNumber(cv), csvNumber(data->cell(k, v))};
                }
        } else if (auto* box = qobject_cast<QCPStatisticalBox*>(plottable)) {
            if (box->data()->isEmpty())
                continue;
            DataTable& t = panelFor(key, value, Kind::Box);
            if (t.columns.isEmpty())
                t.columns = {"series",         x,        y + ": minimum", "lower quartile", "median",
                             "upper quartile", "maximum"};
            for (auto it = box->data()->constBegin(); it != box->data()->constEnd(); ++it)
                t.rows << QStringList{series,
                                      csvNumber(it->key),
                                      csvNumber(it->minimum),
                                      csvNumber(it->lowerQuartile),
                                      csvNumber(it->median),
                                      csvNumber(it->upperQuartile),
                                      csvNumber(it->maximum)};
        }
    }
    QVector<DataTable> tables;
    for (Panel& panel : panels) {
        // Named after what it shows: the value axis (a colour map: its scale).
        panel.table.name = panel.kind == Kind::Map ? panel.table.columns.value(3) : axisName(panel.value, "");
        if (slug(panel.table.name).isEmpty())
            panel.table.name = QString("panel %1").arg(tables.size() + 1);
        tables << panel.table;
    }
    return tables;
}

QString dataTableFile(const QString& file, const QVector<DataTable>& tables, int index)
{
    if (index == 0)
        return file;
    const QFileInfo info(file);
    QStringList taken;
    QString name;
    for (int i = 1; i <= index; ++i) {
        const QString base =
            slug(tables[i].name).isEmpty() ? QString("table-%1").arg(i + 1) : slug(tables[i].name);
        name = base;
        for (int n = 2; taken.contains(name); ++n)
            name = base + QString("-%1").arg(n);
        taken << name;
    }
    const QString suffix = info.suffix().isEmpty() ? QString("csv") : info.suffix();
    return info.dir().filePath(info.completeBaseName() + "-" + name + "." + suffix);
}

QString writeDataTables(const QVector<DataTable>& tables, const QString& file, QStringList* written)
{
    if (tables.isEmpty())
        return file + ": this plot has no data to export";
    if (written)
        written->clear();
    for (int i = 0; i < tables.size(); ++i) {
        const QString path = dataTableFile(file, tables, i);
        QSaveFile out(path);
        const QByteArray text = tableCsv(tables[i]).toUtf8();
        if (!out.open(QIODevice::WriteOnly) || out.write(text) != text.size() || !out.commit())
            return path + ": " + out.errorString();
        if (written)
            *written << path;
    }
    return {};
}

} // namespace embedlab::views
