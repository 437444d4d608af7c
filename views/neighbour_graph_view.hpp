// The LLE neighbour graph (METHODS 2): every token on the embedding's first two
// principal components, common tokens grey and rare ones coloured by how well
// LLE rebuilds them; clicking (or searching) a rare token draws edges to its k
// common neighbours, width by LLE weight, with labels placed so they never
// overlap (greedy, in the order selected token, then by |weight|; a label with
// no free place is hidden). Rare points are drawn above common ones; a colour
// bar gives the cosine bands; right: histogram of the rare rows' reconstruction
// cosines. Beside the plot, the selected token's neighbours with their weights.
// Points are a handful of scatter graphs (no per-point items), so 50k tokens
// stay interactive. The 2-D coordinates and the selection export as CSV.
#pragma once

#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>

#include "plot_view.hpp"

class QCPAxisRect;
class QCPBars;
class QCPCurve;
class QCPItemText;
class QCPTextElement;
class QCPColorScale;
class QLabel;
class QLineEdit;
class QMouseEvent;
class QTableWidget;

namespace embedlab::views {

struct NeighbourGraphData {
    QString label;
    QVector<double> x, y;      // all V tokens, PC 1 and PC 2
    QVector<int> common, rare; // token ids
    int k = 0;
    QVector<int> neighbours;          // [rare.size(), k] common ids, best first
    QVector<double> weights;          // [rare.size(), k] LLE weights (sum to 1 per row)
    QVector<double> neighbour_cosine; // [rare.size(), k] cos(rare row, neighbour row); may be empty
    QVector<double> cosine;           // per rare token: rebuilt vs original
    QVector<double> histogram;        // counts of `cosine` in equal bins over [hist_lo, 1]
    double hist_lo = 0;
    QStringList tokens; // V texts (may be empty)
};

class NeighbourGraphView : public DataPlotView<NeighbourGraphData> {
    Q_OBJECT
public:
    explicit NeighbourGraphView(QWidget* parent = nullptr);
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    QCPAxisRect* histogramRect() const { return hist_rect_; }
    int selectedToken() const { return selected_; } // token id, -1: none
    QString summary() const;
    // The rare token nearest to a pixel position of the scatter (-1 if none within `radius` px).
    int rareTokenAt(const QPointF& pixel, double radius = 12) const;
    // The cosine colour bar beside the scatter.
    QCPColorScale* colourScale() const { return scale_; }
    // The selected token's k neighbours: token (escaped), id, weight, cosine.
    QTableWidget* neighbourList() const { return list_; }
    // Every token's PC 1 / PC 2 as CSV: id,token,x,y,kind,selected,weight (kind rare,
    // common or other; selected 1 for the chosen token; weight: its LLE weight for
    // the chosen token's neighbours, else empty). Tokens escaped as in the labels and
    // quoted. Written to a temporary and renamed (QSaveFile). "" or the problem.
    QString exportCoordinatesCsv(const QString& file) const;
    // Every token coloured by a value per token id instead (a compressed run's damage:
    // KL as target, 1 - cosine), larger worse, in bands by rank (median, 80, 95, 99 %),
    // worst drawn last; NaN (never a target) grey. Empty values: the cosine bands again.
    void setTokenValues(const QVector<double>& values, const QString& label);
    // The value bands' curves in drawing order (the worst last), each in ascending value.
    const QVector<QCPCurve*>& valueCurves() const { return value_curves_; }
    // A pane beside the graph and its neighbour list (the damage panel), in the same splitter.
    void addBeside(QWidget* pane);

public slots:
    bool selectToken(int id);         // false (and no change) unless id is rare
    bool search(const QString& text); // a token id or a rare token's exact text
    // Another view's token (the Compare tab's): selected when rare, else said to be
    // common; with no graph yet, selected once one is drawn. True when selected now.
    bool showToken(int id);

signals:
    void tokenSelected(int id);

private:
    void draw() override;
    void clicked(QMouseEvent* event);
    void drawSelection();
    void fillNeighbourList();
    void placeLabels(); // after every layout: where the labels go at this size
    void exportCsvInteractively();
    void drawValues(); // setTokenValues' colouring, after every draw

    QCPAxisRect* hist_rect_;
    QCPBars* hist_;
    QLineEdit* search_;
    QLabel* stats_;
    QLabel* list_title_;
    QTableWidget* list_;
    QCPColorScale* scale_;
    QVector<int> rare_slot_;       // token id -> index into rare, -1 for common
    QVector<QCPItemText*> labels_; // the selected token's first, then by |weight|
    QVector<QPointF> label_at_;    // the labelled points, plot coordinates
    QPointF press_;                // where the mouse went down: a click is a release near it
    int selected_ = -1;
    int pending_ = -1;                // showToken's id while no graph is drawn
    QVector<double> values_;          // setTokenValues'
    QString values_label_;            // what they are ("" : the cosine bands)
    QVector<QCPCurve*> value_curves_; // curves keep their points' order: the worst on top
    QCPTextElement* scale_label_ = nullptr;
};

} // namespace embedlab::views
